"""`make demo`: two groupkafka queries and a librdkafka consumer sharing one consumer group,
recorded and drawn (see demo/run.py)."""
