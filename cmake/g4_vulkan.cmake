# The Vulkan GPU layer's build switch and shader compilation.
# G4_VULKAN defaults ON when the Vulkan headers/loader (libvulkan-dev) and glslc (glslc) are
# found; OFF builds g4 without the Vulkan code (the GPU policy and tile planner still build and
# `g4 device` says Vulkan was left out). scripts/install-deps.sh installs both.
find_package(Vulkan QUIET COMPONENTS glslc)
if(Vulkan_FOUND AND Vulkan_glslc_FOUND)
  set(G4_VULKAN_DEFAULT ON)
else()
  set(G4_VULKAN_DEFAULT OFF)
endif()
option(G4_VULKAN "Build the Vulkan compute backend (needs libvulkan-dev and glslc)" ${G4_VULKAN_DEFAULT})
if(G4_VULKAN)
  if(NOT (Vulkan_FOUND AND Vulkan_glslc_FOUND))
    message(FATAL_ERROR "G4_VULKAN=ON but the Vulkan headers or glslc were not found "
                        "(scripts/install-deps.sh installs libvulkan-dev and glslc), or configure with -DG4_VULKAN=OFF")
  endif()
  message(STATUS "g4: Vulkan backend ON (headers ${Vulkan_INCLUDE_DIRS}, glslc ${Vulkan_GLSLC_EXECUTABLE})")
else()
  if(G4_VULKAN_DEFAULT)
    message(STATUS "g4: Vulkan backend OFF (G4_VULKAN=OFF given)")
  else()
    message(STATUS "g4: Vulkan backend OFF (libvulkan-dev or glslc not found; scripts/install-deps.sh installs them)")
  endif()
endif()

# g4_spirv(<symbol> <source.comp> [glslc flags...]): compiles one shader variant to SPIR-V and
# embeds it as g4::gpu::spirv::<symbol>(); appends the generated .cpp to G4_SPIRV_SOURCES.
function(g4_spirv symbol source)
  set(spv ${CMAKE_BINARY_DIR}/shaders/${symbol}.spv)
  set(cpp ${CMAKE_BINARY_DIR}/shaders/${symbol}.cpp)
  add_custom_command(
    OUTPUT ${cpp}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/shaders
    COMMAND ${Vulkan_GLSLC_EXECUTABLE} -fshader-stage=compute --target-env=vulkan1.2 -O -Werror ${ARGN}
            ${source} -o ${spv}
    COMMAND ${CMAKE_COMMAND} -DSPV=${spv} -DOUT=${cpp} -DSYMBOL=${symbol} -P ${CMAKE_SOURCE_DIR}/cmake/embed_spirv.cmake
    DEPENDS ${source} ${CMAKE_SOURCE_DIR}/cmake/embed_spirv.cmake ${G4_SHADER_INCLUDES}
    COMMENT "glslc ${symbol}"
    VERBATIM)
  set(G4_SPIRV_SOURCES ${G4_SPIRV_SOURCES} ${cpp} PARENT_SCOPE)
endfunction()

# The Vulkan headers with VK_NO_PROTOTYPES (every call goes through the dlopen'd table) for a
# target that includes src/gpu/vulkan/ headers.
function(g4_vulkan_headers target)
  target_include_directories(${target} PRIVATE ${Vulkan_INCLUDE_DIRS})
  target_compile_definitions(${target} PRIVATE VK_NO_PROTOTYPES)
endfunction()

# The gpu layer: src/gpu/*.cpp always (policy, planner, probe records); src/gpu/vulkan/*.cpp and
# the embedded shaders with G4_VULKAN, else src/gpu/without_vulkan/*.cpp (the probe that says so).
function(g4_gpu_layer)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/gpu/*.cpp)
  if(G4_VULKAN)
    file(GLOB vk_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/gpu/vulkan/*.cpp)
    set(dir ${CMAKE_SOURCE_DIR}/src/gpu/shaders)
    file(GLOB G4_SHADER_INCLUDES CONFIGURE_DEPENDS ${dir}/*.glsl)
    # The four shaders that read weights, one variant per weight format (src/gpu/shaders/weights.glsl).
    foreach(shader matmul gemv embed moe_matvec)
      foreach(fmt f32 f16 bf16 q8_0 q4_0 q4_1 q4_k q5_k q6_k)
        string(TOUPPER ${fmt} FMT)
        g4_spirv(${shader}_${fmt} ${dir}/${shader}.comp -DWEIGHT_${FMT})
      endforeach()
    endforeach()
    # The three weight products again with f16 products summed in f32 (--compute f16;
    # src/gpu/shaders/product.glsl), one variant per weight format: <shader>_c16_<fmt>.
    foreach(shader matmul gemv moe_matvec)
      foreach(fmt f32 f16 bf16 q8_0 q4_0 q4_1 q4_k q5_k q6_k)
        string(TOUPPER ${fmt} FMT)
        g4_spirv(${shader}_c16_${fmt} ${dir}/${shader}.comp -DWEIGHT_${FMT} -DCOMPUTE_F16)
      endforeach()
    endforeach()
    foreach(name rms_norm rope kv_write attention_scores attention_values softmax gelu_mul add_scale softcap moe_route
                 moe_combine)
      g4_spirv(${name} ${dir}/${name}.comp)
    endforeach()
    # The KV cache's shaders again for an f16 cache (GpuDecoderLimits::kv_f16).
    foreach(name kv_write attention_scores attention_values)
      g4_spirv(${name}_f16 ${dir}/${name}.comp -DKV_F16)
    endforeach()
    list(APPEND srcs ${vk_srcs} ${G4_SPIRV_SOURCES})
  else()
    file(GLOB stub_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/gpu/without_vulkan/*.cpp)
    list(APPEND srcs ${stub_srcs})
  endif()
  add_library(g4_gpu STATIC ${srcs})
  if(G4_UNITY)
    set_target_properties(g4_gpu PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
  target_include_directories(g4_gpu PUBLIC ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(g4_gpu PUBLIC g4_platform)
  if(G4_VULKAN)
    # Headers only: the loader is opened with dlopen at run time (src/gpu/vulkan/vk_api.h), so a
    # g4 built with Vulkan still starts on a machine without libvulkan1. PRIVATE: src/gpu's own
    # headers carry no Vulkan type; g4_vulkan_headers() gives the tests of src/gpu/vulkan/ the same.
    g4_vulkan_headers(g4_gpu)
    target_link_libraries(g4_gpu PRIVATE ${CMAKE_DL_LIBS})
  endif()
endfunction()
