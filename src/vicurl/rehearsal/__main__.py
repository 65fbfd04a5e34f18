from vicurl.rehearsal import main

main()
