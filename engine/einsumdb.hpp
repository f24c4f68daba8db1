// einsumdb: every public header of the library. Link einsumdb::einsumdb (CMake) or `pkg-config
// --libs einsumdb`. Start with einsumdb::Engine (engine/engine.hpp); the modules below it are
// the base (core/: the errors a user can cause, timing statistics), the canonical form (canon/),
// the performance store (db/), the executor's strategies (executor/), the tuner (tuner/), the
// planner (planner/) and the MPI runtime (distributed/).
#pragma once

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/canon/contraction_path.hpp"
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/model.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/core/stats.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/feinsum.hpp"
#include "einsumdb/db/location.hpp"
#include "einsumdb/db/machine.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/db/store.hpp"
#include "einsumdb/db/sync.hpp"
#include "einsumdb/db/transform.hpp"
#include "einsumdb/engine/choose.hpp"
#include "einsumdb/engine/engine.hpp"
#include "einsumdb/engine/this_machine.hpp"
#include "einsumdb/executor/dispatch.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/expression.hpp"
#include "einsumdb/executor/npy.hpp"
#include "einsumdb/executor/tensor.hpp"
#include "einsumdb/planner/eindecomp.hpp"
#include "einsumdb/planner/eingraph.hpp"
#include "einsumdb/planner/plan_file.hpp"
#include "einsumdb/planner/plan_store.hpp"
#include "einsumdb/report/report.hpp"
#include "einsumdb/tuner/roofline.hpp"
#include "einsumdb/tuner/tuner.hpp"
#include "einsumdb/version.hpp"
