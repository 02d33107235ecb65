#pragma once
// Python 3 str semantics on UTF-8 text, where reference tools written in Python depend on them: which characters
// str.strip() removes (lm-evaluation-harness's prompts, transformers' added-token flags), len() in code points
// (acc_norm divides by it), and str.capitalize(). Bytes that are not valid UTF-8 count as one code point each.
#include <cstddef>
#include <string>
#include <string_view>

namespace alps {

/// str.isspace() for one code point (ASCII whitespace, \x1c-\x1f, NEL, NBSP and the Unicode space separators).
bool py_isspace(char32_t c);
/// len(s): code points.
size_t py_len(std::string_view s);
/// s.strip() / s.lstrip() / s.rstrip() with no argument.
std::string_view py_strip(std::string_view s);
std::string_view py_lstrip(std::string_view s);
std::string_view py_rstrip(std::string_view s);
/// s.capitalize(): the first code point title-cased, the rest lower-cased, with Unicode's full case mappings (U+00DF
/// becomes "Ss") and the final-sigma rule. `s` must be valid UTF-8.
std::string py_capitalize(std::string_view s);

}  // namespace alps
