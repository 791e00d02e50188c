#include "op_test_util.h"  // the old name; the op tests share op_test_util.h now
