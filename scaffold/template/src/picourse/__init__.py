"""picourse: a small coding-agent runtime built chapter by chapter.

Chapters 06 (the tool contract) and 07 (the agent loop) ship working; chapter 08
(`picourse.coding_tools`) is the lab.
"""
