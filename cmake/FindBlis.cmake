# Finds BLIS (Debian's libblis-serial-dev, or the pthread/openmp flavours, which have no
# pkg-config file) and defines Blis::Blis. einsumdb uses BLIS's micro-kernel API only; its BLAS
# calls go to OpenBLAS, which is linked first.
find_path(BLIS_INCLUDE_DIR blis.h PATH_SUFFIXES blis-serial blis-pthread blis-openmp blis)
find_library(BLIS_LIBRARY NAMES blis PATH_SUFFIXES blis-serial blis-pthread blis-openmp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Blis REQUIRED_VARS BLIS_LIBRARY BLIS_INCLUDE_DIR)
if(Blis_FOUND AND NOT TARGET Blis::Blis)
  add_library(Blis::Blis UNKNOWN IMPORTED)
  set_target_properties(Blis::Blis PROPERTIES IMPORTED_LOCATION "${BLIS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${BLIS_INCLUDE_DIR}")
endif()
