# find_package(etcdlock) -> etcdlock::etcdlock (the shared library:
# libetcdlock.so.<major>, libetcdlock.dylib or etcdlock.dll with its import
# library) and etcdlock::etcdlock_static (the archive, with its system libraries).
get_filename_component(_etcdlock_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include(CMakeFindDependencyMacro)
find_dependency(Threads)
if(NOT TARGET etcdlock::etcdlock)
  add_library(etcdlock::etcdlock SHARED IMPORTED)
  set_target_properties(etcdlock::etcdlock PROPERTIES
    IMPORTED_LOCATION "${_etcdlock_prefix}/@SHARED@"
    @SHARED_PROPS@
    INTERFACE_INCLUDE_DIRECTORIES "${_etcdlock_prefix}/include")
endif()
if(NOT TARGET etcdlock::etcdlock_static)
  add_library(etcdlock::etcdlock_static STATIC IMPORTED)
  set_target_properties(etcdlock::etcdlock_static PROPERTIES
    IMPORTED_LOCATION "${_etcdlock_prefix}/lib/libetcdlock.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_etcdlock_prefix}/include"
    INTERFACE_LINK_LIBRARIES "Threads::Threads;@CMAKE_SYSLIBS@")
endif()
set(etcdlock_VERSION "@VERSION@")
unset(_etcdlock_prefix)
