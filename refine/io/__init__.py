"""Files and folders: ``files`` (atomic writes, appended JSON lines, safe names, confined
paths, image folders, content hashes) and ``store`` (run directories and their lock)."""
