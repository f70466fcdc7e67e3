#include <dlfcn.h>

#include <mutex>

#include "gpu/vulkan/vk_api.h"
#include "gpu/vulkan/vk_result.h"

namespace g4::gpu {

namespace {
struct InstanceOrWhy {
  VulkanInstance instance;
  std::string why;  // empty when instance is usable
};

InstanceOrWhy create() {
  InstanceOrWhy out;
  // RTLD_LOCAL: the loader's symbols stay out of the global namespace; g4 calls only the table.
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    out.why = "no Vulkan loader (libvulkan.so.1 not found; Debian: apt install libvulkan1 mesa-vulkan-drivers)";
    return out;
  }
  auto get = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (!get) {
    out.why = "libvulkan.so.1 has no vkGetInstanceProcAddr";
    return out;
  }
  VulkanApi& api = out.instance.api;
#define G4_VK_LOAD(name) api.name = reinterpret_cast<PFN_##name>(get(VK_NULL_HANDLE, #name));
  G4_VK_GLOBAL_FUNCTIONS(G4_VK_LOAD)
#undef G4_VK_LOAD
  // vkEnumerateInstanceVersion exists from loader 1.1 on; g4 needs 1.1's properties2 queries.
  if (!api.vkEnumerateInstanceVersion || api.vkEnumerateInstanceVersion(&out.instance.loader_version) != VK_SUCCESS) {
    out.why = "the Vulkan loader is older than 1.1";
    return out;
  }
  auto app = vk_info<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "g4";
  app.apiVersion = VK_API_VERSION_1_3;  // the highest g4 uses; devices report their own below
  auto info = vk_info<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  info.pApplicationInfo = &app;
  const VkResult r = api.vkCreateInstance(&info, nullptr, &out.instance.handle);
  if (r != VK_SUCCESS) {
    out.why = "vkCreateInstance failed: " + std::string(vk_result_name(r)) +
              (r == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no Vulkan driver installed)" : "");
    return out;
  }
#define G4_VK_LOAD(name) api.name = reinterpret_cast<PFN_##name>(get(out.instance.handle, #name));
  G4_VK_INSTANCE_FUNCTIONS(G4_VK_LOAD)
#undef G4_VK_LOAD
  return out;
}
}  // namespace

const VulkanInstance* vulkan_instance(std::string* why) {
  static std::once_flag once;
  static InstanceOrWhy made;
  std::call_once(once, [] { made = create(); });
  if (!made.why.empty()) {
    if (why) *why = made.why;
    return nullptr;
  }
  return &made.instance;
}

}  // namespace g4::gpu
