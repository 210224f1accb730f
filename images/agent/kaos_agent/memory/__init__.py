"""Agent memory backends: none, the pod-local window, and the memory service."""
