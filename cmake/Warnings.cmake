# nanokv_warnings(target): the project's warning set, errors when NANOKV_WERROR
# (thread-safety errors always, under clang).
function(nanokv_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wnon-virtual-dtor
                         -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough)
  if(NANOKV_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  # clang checks the lock discipline written as NANOKV_GUARDED_BY and
  # NANOKV_REQUIRES (gpu/thread_annotations.h): a breach is an error in every
  # clang build (CI's fuzz build is one), with or without NANOKV_WERROR.
  target_compile_options(${target} PRIVATE
                         "$<$<COMPILE_LANG_AND_ID:CXX,Clang>:-Wthread-safety;-Werror=thread-safety>")
endfunction()
