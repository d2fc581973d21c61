"""The commands of ``spillway``: one module each (its docstring's first line is its summary in ``spillway -h``, its
``command`` the click command), a package for a group of them; see spillway/cli/app.py."""
