# Installation for C users: header, static and shared library, a CMake
# package (find_package(flashattn) -> flashattn::flashattn, the shared library,
# and flashattn::flashattn_static) and a pkg-config file.
#
# Every rule names a component, runtime or devel, so that the wheel built by
# scikit-build-core, which installs only the component "python", gets none of
# them. A plain `cmake --install` installs both.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FLASHATTN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashattn)

# Exported as flashattn::flashattn and flashattn::flashattn_static. The
# objects of flashattn_objs are compiled into both ($<TARGET_OBJECTS:...>),
# not linked, so the export set needs neither it nor the internal targets;
# INCLUDES DESTINATION adds the installed include directory to the exported
# targets, whose build-tree one is a BUILD_INTERFACE.
install(TARGETS flashattn flashattn_static EXPORT flashattnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT devel
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/flashattn.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel)
# The MPI component, when built: its library and header (not in the CMake
# package's export set, whose users need no MPI).
if(TARGET flashattn_mpi)
  install(TARGETS flashattn_mpi
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT devel)
  install(FILES ${PROJECT_SOURCE_DIR}/include/flashattn_mpi.h
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)

install(EXPORT flashattnTargets NAMESPACE flashattn::
  FILE flashattnTargets.cmake DESTINATION ${FLASHATTN_CMAKE_DIR} COMPONENT devel)

# Both libraries carry OpenMP::OpenMP_C (when the build found it),
# Threads::Threads and m in their public link interface, so the package must
# find the first two again on the consumer's side.
if(OpenMP_C_FOUND)
  set(FLASHATTN_WITH_OPENMP ON)
else()
  set(FLASHATTN_WITH_OPENMP OFF)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/flashattnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/flashattnConfig.cmake
  INSTALL_DESTINATION ${FLASHATTN_CMAKE_DIR})
# The SONAME stays libflashattn.so.0 through 0.x, so the package claims the
# same: any 0.y satisfies a request for 0.x with y >= x.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/flashattnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/flashattnConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/flashattnConfigVersion.cmake
  DESTINATION ${FLASHATTN_CMAKE_DIR} COMPONENT devel)

# pkg-config: paths relative to the .pc file's own directory, so that the
# prefix given to `cmake --install --prefix` (which may differ from
# CMAKE_INSTALL_PREFIX at configure time) and a later move both keep it right.
# An absolute CMAKE_INSTALL_LIBDIR or INCLUDEDIR is written as it is.
set(_fa_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(FLASHATTN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _fa_up "/${_fa_pc_dir}" "/")
  string(REGEX REPLACE "/$" "" _fa_up "${_fa_up}")
  set(FLASHATTN_PC_PREFIX "\${pcfiledir}/${_fa_up}")
endif()
foreach(d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${d}}")
    set(FLASHATTN_PC_${d} "${CMAKE_INSTALL_${d}}")
  else()
    set(FLASHATTN_PC_${d} "\${prefix}/${CMAKE_INSTALL_${d}}")
  endif()
endforeach()
# What linking the static library needs beyond itself (pkg-config --static).
set(FLASHATTN_PC_LIBS_PRIVATE "")
if(OpenMP_C_FOUND)
  string(APPEND FLASHATTN_PC_LIBS_PRIVATE "${OpenMP_C_FLAGS} ")
endif()
string(APPEND FLASHATTN_PC_LIBS_PRIVATE "-lm")
if(CMAKE_USE_PTHREADS_INIT)
  string(APPEND FLASHATTN_PC_LIBS_PRIVATE " -pthread")
elseif(CMAKE_THREAD_LIBS_INIT)
  string(APPEND FLASHATTN_PC_LIBS_PRIVATE " ${CMAKE_THREAD_LIBS_INIT}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/flashattn.pc.in
  ${CMAKE_CURRENT_BINARY_DIR}/flashattn.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/flashattn.pc
  DESTINATION ${_fa_pc_dir} COMPONENT devel)
