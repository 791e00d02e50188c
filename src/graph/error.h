#pragma once
// The library's one exception type is public: include/grove/error.h.
#include "grove/error.h"
