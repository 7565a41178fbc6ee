# Third-party dependencies, all from Debian packages (tools/install-deps.sh installs them).
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)
find_package(CUDAToolkit)   # optional here: NVRTC/CUPTI are used by later stages when present
if(NAUTILUS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(NAUTILUS_BUILD_STUDIO)
  find_package(Qt6 REQUIRED COMPONENTS Widgets Gui Core)
endif()
