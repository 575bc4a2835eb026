"""freellm.providers"""
