"""freellm.wire"""
