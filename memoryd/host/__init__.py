"""The agent host (opencode) as seen by memoryd. Import each name from the module that defines it:
the HTTP client (`opencode`), payload models (`models`), the live server a session runs on
(`live`, kept lean: importing it loads no HTTP client).
"""
