# Finds BLIS's header (Debian's libblis-serial-dev, or the pthread/openmp flavours, which have no
# pkg-config file) and its run-time library. einsumdb compiles against blis.h and loads
# libblis.so.4 at run time with RTLD_LOCAL (executor/tensor_gemm/micro_kernel.hpp), so that
# BLIS's own BLAS symbols never take the place of OpenBLAS's: nothing links against it.
find_path(BLIS_INCLUDE_DIR blis.h PATH_SUFFIXES blis-serial blis-pthread blis-openmp blis)
find_library(BLIS_LIBRARY NAMES libblis.so.4 blis PATH_SUFFIXES blis-serial blis-pthread blis-openmp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Blis REQUIRED_VARS BLIS_INCLUDE_DIR BLIS_LIBRARY)
