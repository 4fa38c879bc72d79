"""The timeline: instants, their files and transitions, instant times, commit metadata."""
