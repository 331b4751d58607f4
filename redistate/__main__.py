"""``python -m redistate``: the ``redistate`` command."""

if __name__ == "__main__":
    from redistate.cli.app import main

    main()
