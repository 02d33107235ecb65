# Writes OUTPUT (a header defining ALPS_SOURCE_REVISION) with the revision of the checkout in SOURCE_DIR:
# `git describe --always --dirty` (a commit, "-dirty" when tracked files differ from it), or "unknown" outside a git
# checkout. Run at every build; the file is rewritten only when the revision changed, so nothing recompiles otherwise.
execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
if(NOT status EQUAL 0 OR revision STREQUAL "")
  set(revision "unknown")
endif()
set(content "#pragma once\n// Written by cmake/source_revision.cmake at build time.\n#define ALPS_SOURCE_REVISION \"${revision}\"\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUTPUT}" "${content}")
endif()
