#pragma once
// The Engine is public: include/grove/engine.h.
#include "grove/engine.h"
