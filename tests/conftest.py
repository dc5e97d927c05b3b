import sys
from pathlib import Path

# Test helpers (fake servers, scripted models) live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
