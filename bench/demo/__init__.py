"""The bundled synthetic world and the `bench demo` main job."""
