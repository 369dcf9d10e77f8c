# nanokv_warnings(target): the project's warning set, errors when NANOKV_WERROR.
function(nanokv_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wnon-virtual-dtor
                         -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough)
  if(NANOKV_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
