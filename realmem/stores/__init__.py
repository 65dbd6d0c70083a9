"""Where memories live: a directory's project and stores, path frames, memory ids."""
