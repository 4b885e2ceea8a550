# Writes build_info.hpp with the commit being built. It runs at every build, not at configure time (a build
# folder configured once and built at later commits stamped the old commit into every result), and rewrites
# the header only when the stamp changes, so that an unchanged commit rebuilds nothing.
# In: SOURCE_DIR, GIT_EXECUTABLE (may be empty), INPUT (the .in template), OUTPUT.
set(SKINNY_GIT_COMMIT "$ENV{SKINNY_GIT_COMMIT}")
if(NOT SKINNY_GIT_COMMIT AND GIT_EXECUTABLE)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE SKINNY_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  # Tracked files changed since that commit: the binary is not that commit's, and says so.
  execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(SKINNY_GIT_COMMIT AND changes)
    string(APPEND SKINNY_GIT_COMMIT "-dirty")
  endif()
endif()
if(NOT SKINNY_GIT_COMMIT)
  set(SKINNY_GIT_COMMIT "unknown")
endif()
configure_file(${INPUT} ${OUTPUT}.new @ONLY)
file(COPY_FILE ${OUTPUT}.new ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.new)
