"""The console's own load client for OpenAI-compatible servers: the requests a block sends
(workload), the streaming HTTP that sends them and times every chunk (client), and the figures
read from what came back (metrics)."""
