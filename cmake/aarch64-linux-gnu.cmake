# Cross toolchain for aarch64 Linux with Debian's cross compiler (crossbuild-essential-arm64) and
# multiarch packages (libhwy-dev:arm64, libgtest-dev:arm64, ...; scripts/install-arm64-cross.sh).
#   cmake -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DG4_BUILD_BENCH=OFF
# ctest runs the test binaries through qemu-user (CMAKE_CROSSCOMPILING_EMULATOR); scripts/test-arm64.sh
# does all of it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(G4_TRIPLET aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${G4_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${G4_TRIPLET}-g++)

# Where the arm64 files are: the cross sysroot /usr/aarch64-linux-gnu (C library and libstdc++ of
# crossbuild-essential-arm64; the compiler finds them itself) and the multiarch folder
# /usr/lib/aarch64-linux-gnu (the -dev packages' libraries, CMake configs and .pc files). Their
# headers are in /usr/include, shared with the host (Highway's, GoogleTest's, cpp-httplib's and
# nlohmann-json's are the same for every architecture), so libraries, headers and packages are
# searched both under the root paths and in the host's prefixes (BOTH); CMAKE_LIBRARY_ARCHITECTURE
# makes the host prefixes' search go to <prefix>/lib/aarch64-linux-gnu, so the arm64 hwy and GTest
# configs are found and never the x86-64 ones in /usr/lib/x86_64-linux-gnu. Programs (pkg-config,
# the code generators) are always the host's.
set(CMAKE_FIND_ROOT_PATH /usr/${G4_TRIPLET} /usr/lib/${G4_TRIPLET})
set(CMAKE_LIBRARY_ARCHITECTURE ${G4_TRIPLET})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config (cpp-httplib) must read the arm64 .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${G4_TRIPLET}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# Run the target's programs (gtest discovery at build time, ctest) under qemu-user. The loader and
# the C library must come from one package. With the multiarch libc6:arm64 installed (the -dev
# packages above pull it in), /lib/ld-linux-aarch64.so.1 is its loader and ld.so.cache lists its
# libc.so.6, so qemu runs without -L. `-L /usr/aarch64-linux-gnu` would pair the cross package's
# loader (libc6-arm64-cross, glibc 2.36-8) with the multiarch libc.so.6 (2.36-9+deb12u*): every
# pthread_create then spun forever in glibc's thread-stack cache walk (seen with qemu 7.2). Without
# the multiarch C library, the cross sysroot serves both, and -L is what finds them.
if(EXISTS /lib/ld-linux-aarch64.so.1)
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
else()
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${G4_TRIPLET})
endif()
