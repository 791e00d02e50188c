#include "serve/json_depth.h"

#include <string>

#include "serve/http_types.h"

namespace grove::serve {

int json_nesting_depth(std::string_view text, int stop_after) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character, which may be a quote
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > stop_after) return deepest;  // no need to scan the rest of a hostile body
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

void check_json_depth(std::string_view text, int max_depth) {
  if (json_nesting_depth(text, max_depth) > max_depth)
    throw HttpError(400, "JSON nested deeper than " + std::to_string(max_depth) + " levels (the server's max_json_depth)");
}

}  // namespace grove::serve
