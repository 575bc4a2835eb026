"""freellm.surfaces"""
