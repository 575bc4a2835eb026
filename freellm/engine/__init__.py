"""freellm.engine"""
