"""Helpers the tests share (imported as ``helpers.x``) and helper processes run as scripts."""
