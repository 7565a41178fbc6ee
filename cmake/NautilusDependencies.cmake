# Third-party dependencies, all from Debian packages (tools/install-deps.sh installs them).
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)
find_package(CUDAToolkit)   # optional here: NVRTC/CUPTI are used by later stages when present
if(NAUTILUS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# Z3 (Debian's libz3-dev) for the pipeline solver (core/pipeline). Debian ships no Z3 CMake
# package, so pkg-config describes it; the imported target is PkgConfig::NAUTILUS_Z3. Only
# nautilus_pipeline links it: the runner, which runs on GPU hosts without Z3, never does.
find_package(PkgConfig REQUIRED)
pkg_check_modules(NAUTILUS_Z3 REQUIRED IMPORTED_TARGET z3)

if(NAUTILUS_BUILD_STUDIO)
  # Widgets for the main window and panels; OpenGL/OpenGLWidgets host the Dear ImGui panels;
  # Svg renders icons; Test gives the view tests QAbstractItemModelTester. (libqt6opengl6-dev must
  # be installed by name: it is only a Recommends of qt6-base-dev.)
  find_package(Qt6 REQUIRED COMPONENTS Core Gui Widgets OpenGL OpenGLWidgets Svg Test)

  # Dear ImGui and Graphviz ship no CMake packages on Debian; pkg-config describes them. Debian's
  # libimgui-dev is one static library that already contains the OpenGL3 backend (1.86, pre-1.87
  # input API). The imported targets are PkgConfig::NAUTILUS_IMGUI and
  # PkgConfig::NAUTILUS_GRAPHVIZ.
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(NAUTILUS_IMGUI REQUIRED IMPORTED_TARGET imgui)
  pkg_check_modules(NAUTILUS_GRAPHVIZ REQUIRED IMPORTED_TARGET libgvc libcgraph)
endif()

# The libFuzzer build instruments code with clang's -fsanitize=fuzzer; GCC has no libFuzzer.
if(NAUTILUS_LIBFUZZER AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "NAUTILUS_LIBFUZZER=ON needs clang (configure with CXX=clang++); "
                      "the C++ compiler is ${CMAKE_CXX_COMPILER_ID}.")
endif()
