#pragma once
// A bound on JSON nesting, checked on the text before it is parsed: a body of a few hundred KB
// nested tens of thousands of levels deep would otherwise reach code that recurses per level
// (copies, comparisons, dumps of the parsed value) and overflow the stack.
#include <string_view>

namespace grove::serve {

// The deepest nesting of arrays and objects in `text` (brackets inside strings do not count).
// Exact for valid JSON; for invalid JSON it is the depth up to where a parser fails or more.
int json_nesting_depth(std::string_view text, int stop_after);

// Throws HttpError(400) naming the limit when `text` nests deeper than `max_depth`.
void check_json_depth(std::string_view text, int max_depth);

}  // namespace grove::serve
