#pragma once
// grove's public C++ API: everything a program needs, and nothing of the library's insides.
//
//   grove::Engine engine({.threads = 2});                 // one worker per core, shared by all runs
//   grove::Session s(engine, grove::Model::load("resnet.onnx"));
//   grove::TensorMap out = s.run({{"input", image}});     // blocking
//   auto pending = s.submit({{"input", image}});          // concurrent with other submits
//   grove::TensorMap later = pending.get();
//
// Errors are grove::Error (a std::runtime_error) with one line naming the file, node and op.
#include "grove/buffer_stats.h"
#include "grove/cancel.h"
#include "grove/check.h"
#include "grove/dynamic.h"
#include "grove/engine.h"
#include "grove/error.h"
#include "grove/generate.h"
#include "grove/limits.h"
#include "grove/model.h"
#include "grove/precision.h"
#include "grove/schedule.h"
#include "grove/session.h"
#include "grove/tensor.h"
#include "grove/value.h"
