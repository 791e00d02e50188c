#pragma once
// Model is public (include/grove/model.h); the library also needs the Graph inside it.
#include "passes/bind.h"
#include "grove/model.h"
#include "runtime/reference_executor.h"
