"""freellm.server"""
