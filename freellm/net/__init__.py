"""Network policy shared by every place the gateway opens a connection a user asked for (:mod:`.ssrf`)."""
