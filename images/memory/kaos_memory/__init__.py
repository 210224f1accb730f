"""The KAOS memory service: window, digest and Mem0 long-term behind the v1 contract."""
