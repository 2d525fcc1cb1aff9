"""RocketMQ's remoting protocol: the TCP frames Apache's own clients speak (4.x style).

Pure modules (no I/O, the h11 way): ``command`` (frames, the JSON and the binary header,
flags, opaque), ``fields`` (the request headers as RocketMQ names them), ``bodies`` (the JSON
bodies) and ``records`` (the version-1 records those clients decode). ``server`` is the one
piece with sockets: an asyncio TCP server that runs a handler per request, used by the name
server and the broker alike.
"""
