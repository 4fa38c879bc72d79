"""The timeline: instants, their files and transitions, instant times, commit metadata.

Taught in: notebooks/02_timeline.ipynb
"""
