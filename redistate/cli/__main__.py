from redistate.cli.app import main

main()
