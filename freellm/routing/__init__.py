"""freellm.routing"""
