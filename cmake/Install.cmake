# `make install` (cmake --install <build> [--prefix P]): what an operator runs
# and what an engine builds against (docs/OPERATIONS.md, "Install"):
#   bin/            kvd, kvctl, kvtop (a link to kvctl)
#   lib/            libnanokv.so (the C ABI) and the static C++ libraries
#                   engines link (nanokv::cache over nanokv::client over the rest)
#   include/nanokv/ the public headers (libkv/include/nanokv, base/include/nanokv)
#   lib/cmake/nanokv/   find_package(nanokv) (targets nanokv::client, nanokv::cache, nanokv::capi)
#   lib/pkgconfig/      nanokv.pc (C++), nanokv-c.pc (the C ABI)
#   lib/python3/dist-packages/nanokv  the Python package, libnanokv.so linked beside it
#   etc/nanokv/kvd.yaml, etc/nanokv/master.yaml  the configs the units name
#   share/nanokv/   every config as shipped, the Grafana dashboard
#   lib/systemd/system/ kvd.service, kvd-master.service (paths set to this prefix)
# Everything is relative to the prefix chosen at install time, so a tree
# installed anywhere (a package's staging dir, a test's temp dir) is whole.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(NANOKV_PYTHON_DIR "lib/python3/dist-packages" CACHE STRING
    "Where `make install` puts the Python package, under the prefix")

# The libraries engines link, with the names find_package users see.
set(_nanokv_exported nanokv_base nanokv_gpu nanokv_wire_proto nanokv_ipc nanokv_client nanokv_cache nanokv_capi)
if(NANOKV_CUDA_KERNELS)
  list(APPEND _nanokv_exported nanokv_kernels)
endif()
foreach(target IN LISTS _nanokv_exported)
  string(REGEX REPLACE "^nanokv_" "" short ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${short})
  # In the build their include folders are the source tree's; installed, include/.
  foreach(property INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
    get_target_property(dirs ${target} ${property})
    if(dirs)
      set(wrapped)
      foreach(dir IN LISTS dirs)
        if(dir MATCHES "^\\$<")
          list(APPEND wrapped "${dir}")
        else()
          list(APPEND wrapped "$<BUILD_INTERFACE:${dir}>")
        endif()
      endforeach()
      set_property(TARGET ${target} PROPERTY ${property} "${wrapped}")
    endif()
  endforeach()
  target_include_directories(${target} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # The public headers are C++20 (defaulted operator==, std::span): a
  # consumer gets the standard from the target, whatever its own default.
  # Not the C ABI's target: a C program links it.
  if(NOT target STREQUAL "nanokv_capi")
    target_compile_features(${target} INTERFACE cxx_std_20)
  endif()
endforeach()

install(TARGETS kvd kvctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(CODE "execute_process(COMMAND \${CMAKE_COMMAND} -E create_symlink kvctl
  \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/kvtop\")")
install(TARGETS ${_nanokv_exported} EXPORT nanokvTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY libkv/include/nanokv base/include/nanokv DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

# find_package(nanokv)
set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/nanokv)
install(EXPORT nanokvTargets NAMESPACE nanokv:: DESTINATION ${_cmake_dir})
configure_package_config_file(cmake/nanokvConfig.cmake.in ${PROJECT_BINARY_DIR}/nanokvConfig.cmake
                              INSTALL_DESTINATION ${_cmake_dir} PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/nanokvConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/nanokvConfig.cmake ${PROJECT_BINARY_DIR}/nanokvConfigVersion.cmake
        DESTINATION ${_cmake_dir})

# pkg-config: relocatable (${pcfiledir}), so the prefix is the one installed to.
file(RELATIVE_PATH NANOKV_PC_PREFIX "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
set(NANOKV_PC_LIBS "-lnanokv_cache -lnanokv_client -lnanokv_ipc -lnanokv_wire_proto -lnanokv_gpu")
if(NANOKV_CUDA_KERNELS)
  string(APPEND NANOKV_PC_LIBS " -lnanokv_kernels -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lrt")
endif()
string(APPEND NANOKV_PC_LIBS " -lnanokv_base -ldl -pthread")  # dl: the GPU drivers are dlopen'ed
configure_file(cmake/nanokv.pc.in ${PROJECT_BINARY_DIR}/nanokv.pc @ONLY)
configure_file(cmake/nanokv-c.pc.in ${PROJECT_BINARY_DIR}/nanokv-c.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/nanokv.pc ${PROJECT_BINARY_DIR}/nanokv-c.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The Python package, and libnanokv.so beside it as a relative link (its
# loader looks there first: python/nanokv/_lib.py).
install(DIRECTORY python/nanokv DESTINATION ${NANOKV_PYTHON_DIR} PATTERN "__pycache__" EXCLUDE)
file(RELATIVE_PATH _to_lib "/root/${NANOKV_PYTHON_DIR}/nanokv" "/root/${CMAKE_INSTALL_LIBDIR}")
install(CODE "execute_process(COMMAND \${CMAKE_COMMAND} -E create_symlink ${_to_lib}/libnanokv.so
  \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${NANOKV_PYTHON_DIR}/nanokv/libnanokv.so\")")

# Configs, units, dashboard, docs.
# Both configs the units name go to etc/ (kvd.service: kvd.yaml,
# kvd-master.service: master.yaml).
install(FILES configs/kvd.yaml configs/master.yaml DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/nanokv)
install(DIRECTORY configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/nanokv/configs)
install(FILES packaging/grafana/nanokv-dashboard.json DESTINATION ${CMAKE_INSTALL_DATADIR}/nanokv/grafana)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The units name /usr/bin/kvd, /etc/nanokv and /usr/share/doc/nanokv (a
# Debian-style install); installed elsewhere, they are rewritten to this
# prefix's paths.
foreach(unit kvd.service kvd-master.service)
  install(CODE "
    file(READ \"${PROJECT_SOURCE_DIR}/packaging/systemd/${unit}\" text)
    string(REPLACE \"/usr/bin/\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/\" text \"\${text}\")
    string(REPLACE \"/usr/share/doc/nanokv/\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}/\" text \"\${text}\")
    if(NOT \"\${CMAKE_INSTALL_PREFIX}\" STREQUAL \"/usr\")
      string(REPLACE \"/etc/nanokv/\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SYSCONFDIR}/nanokv/\" text \"\${text}\")
    endif()
    file(WRITE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system/${unit}\" \"\${text}\")
    message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system/${unit}\")")
endforeach()
