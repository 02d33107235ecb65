# Writes OUTPUT (a header defining ALPS_SOURCE_REVISION) with the revision of the checkout in SOURCE_DIR: its commit
# (12 hex digits, never a tag name), "-dirty" when tracked files differ from it, or "unknown" when SOURCE_DIR is not
# the top of a git checkout (a tarball, also one unpacked inside some other repository). Run at every build; the
# file is rewritten only when the revision changed, so nothing recompiles otherwise.
set(revision "unknown")
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --show-toplevel
                OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
if(status EQUAL 0)
  file(REAL_PATH "${SOURCE_DIR}" source_real)
  file(REAL_PATH "${top}" top_real)
  if(top_real STREQUAL source_real)
    execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12 --exclude=*
                    OUTPUT_VARIABLE described OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
    if(status EQUAL 0 AND NOT described STREQUAL "")
      set(revision "${described}")
    endif()
  endif()
endif()
set(content "#pragma once\n// Written by cmake/source_revision.cmake at build time.\n#define ALPS_SOURCE_REVISION \"${revision}\"\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUTPUT}" "${content}")
endif()
