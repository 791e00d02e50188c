# Runtime build switches. The TSan build needs nothing here: configure with
# -DGROVE_SANITIZE=thread (top CMakeLists.txt).
find_package(Threads REQUIRED)
target_link_libraries(grove PUBLIC Threads::Threads)

# Schedule fuzzing for tests (src/runtime/adversary.h): random delays around tiles, random
# pop/steal order and followed child. Never for production builds. Only the runtime's own
# files see the definition, so toggling it rebuilds just them.
option(GROVE_ADVERSARIAL "Randomise the runtime's schedule (test builds only)" OFF)
if(GROVE_ADVERSARIAL)
  file(GLOB GROVE_RUNTIME_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cpp)
  set_property(SOURCE ${GROVE_RUNTIME_SOURCES} APPEND PROPERTY COMPILE_DEFINITIONS GROVE_ADVERSARIAL)
endif()
