# Cross build for 64-bit Arm Linux with the distribution's cross gcc
# (Debian: gcc-aarch64-linux-gnu); ctest runs the tests under user-mode
# qemu (qemu-user), with the target's libraries from its sysroot.
# QEMU_CPU picks the emulated CPU (qemu's own variable): `max` has SVE,
# `max,sve-default-vector-length=32` sets a 256-bit vector length.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(FA_AARCH64_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${FA_AARCH64_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${FA_AARCH64_TRIPLE}-g++)
set(CMAKE_FIND_ROOT_PATH /usr/${FA_AARCH64_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${FA_AARCH64_TRIPLE})
