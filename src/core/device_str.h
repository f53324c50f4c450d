/* Backend names as core knows them, for naming devices (cn_device_str) without asking the
 * registry, which lives above core. The registry (dispatch) records each backend's name here as it
 * registers it: dispatch calls down into core, never the other way. */
#ifndef CINDER_CORE_DEVICE_STR_H
#define CINDER_CORE_DEVICE_STR_H

/* The most backends a process registers (the registry's size, dispatch/registry.h). */
#define CN__MAX_BACKENDS 16

/* Records the name of backend id (0 <= id < CN__MAX_BACKENDS) before the registry makes the id
 * visible; name is the backend table's own string, which lives as long as the process. */
void cn__backend_name_set(int id, const char *name);

#endif
