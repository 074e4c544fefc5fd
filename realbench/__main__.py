from realbench.cli import run

run()
