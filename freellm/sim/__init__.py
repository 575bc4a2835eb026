"""freellm.sim"""
